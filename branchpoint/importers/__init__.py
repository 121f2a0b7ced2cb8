"""Importers: other frameworks' logs turned into branchpoint traces (`ExecutionRecord`s)."""
