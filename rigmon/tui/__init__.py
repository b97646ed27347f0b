"""The Textual dashboard: app, screens, widgets, themes."""
