"""CI plumbing: stage test lists, waives, JUnit merging, the /bot grammar and GPU discovery."""
