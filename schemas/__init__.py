"""The contract between lmforge stages: record types, Arrow schemas and manifest formats.

Stages never import each other's internals; they read and write files described here.
Every schema carries a version string; bump it when a reader written for the old one would
misread the new one.
"""
