"""Textual dashboard."""
