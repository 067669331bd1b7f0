"""Helpers every layer may use (typed options, logging); they import nothing of lmforge's own."""
