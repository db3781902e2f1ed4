"""Compatibility layers for trainers that already have an interaction API."""
