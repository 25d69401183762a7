import os
import sys
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# The suite gates CI, so its property tests draw the same examples on every run
# (`derandomize`): a failure is reproducible and never a matter of luck. To search
# further, run with HYPOTHESIS_PROFILE=explore (random examples, Hypothesis's database).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
