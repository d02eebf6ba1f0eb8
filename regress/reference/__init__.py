"""The embedded reference DSA + MTP-Eagle engine, its metadata mirrors and historical defects."""
