"""lmforge: web crawl in, evaluated and distilled language models out."""

__version__ = "0.1.0"
