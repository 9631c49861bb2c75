"""Unit tests of the HTTP gateway's pure parts."""
