"""Task packages: each task's data, model heads, run loop and export."""
