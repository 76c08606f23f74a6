"""What one `doit` invocation holds for its lifetime: the project's lock, its signals, and a
watchdog for the processes it starts."""
