"""branchpoint: experiments on search-augmented LLM agents: when should an agent search?"""

__version__ = "0.1.0"
