"""Prefect flows: orchestration only. Each task launches one stage's entry point and returns
the directory it wrote."""
