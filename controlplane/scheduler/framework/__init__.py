"""The scheduling framework: extension points, their results, and the data plugins read."""
