import os
import sys

# Tests import helpers from tests/support.py.
sys.path.insert(0, os.path.dirname(__file__))
