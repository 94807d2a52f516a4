"""Exports: a dataset's episodes in the forms models train on (services, LeRobot writer)."""
