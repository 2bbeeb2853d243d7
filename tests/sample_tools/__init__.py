"""A third-party tool package (outside toolroute) used by the scanning tests."""
