"""FAISS on the GPU: whether the installed faiss can, and moving indexes there and back.

`device="gpu"` moves a faiss index to the first GPU (flat and ivf; faiss has no GPU HNSW) when
the installed faiss has GPU support (the faiss-gpu wheels), else a clear InputError.
"""

from __future__ import annotations

from typing import Any

from branchpoint.errors import InputError
from branchpoint.retrieval._deps import require


def faiss_module() -> Any:
    """The faiss module, or one line saying what to install."""
    return require("faiss", "faiss-cpu", "the dense index")


def check_gpu(kind: str) -> None:
    """InputError unless the installed faiss can put a `kind` index on a GPU."""
    faiss = faiss_module()
    if kind in ("hnsw", "pq"):
        raise InputError(
            f"device gpu: faiss has no GPU {kind.upper()} index; use index kind flat or ivf on the GPU, "
            f"or device cpu for {kind}"
        )
    if not hasattr(faiss, "StandardGpuResources") or not hasattr(faiss, "index_cpu_to_gpu"):
        raise InputError(
            f"device gpu: the installed faiss ({getattr(faiss, '__version__', '?')}) has no GPU "
            "support; on a CUDA machine install faiss with GPU support instead of faiss-cpu "
            "(pip install faiss-gpu-cu12), or use device cpu"
        )
    if faiss.get_num_gpus() < 1:
        raise InputError(
            "device gpu: faiss has GPU support but sees no GPU (check "
            "CUDA_VISIBLE_DEVICES and the driver), or use device cpu"
        )


_GPU_RESOURCES: Any = None


def to_gpu(index: Any) -> Any:
    """The index copied to GPU 0 (one shared StandardGpuResources per process)."""
    global _GPU_RESOURCES
    faiss = faiss_module()
    if _GPU_RESOURCES is None:
        _GPU_RESOURCES = faiss.StandardGpuResources()
    return faiss.index_cpu_to_gpu(_GPU_RESOURCES, 0, index)


def on_gpu(index: Any) -> bool:
    """Whether a faiss index lives on a GPU."""
    return "Gpu" in type(index).__name__


def to_cpu(index: Any) -> Any:
    """The index itself, or its CPU copy when it lives on a GPU."""
    return faiss_module().index_gpu_to_cpu(index) if on_gpu(index) else index
