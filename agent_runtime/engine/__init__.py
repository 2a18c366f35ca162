"""The engine: blocks, views, sections, the scheduler, the model runner and the streams."""
