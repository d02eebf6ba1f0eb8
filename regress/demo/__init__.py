"""``regress demo``: plant historical regressions in a throwaway history and bisect them."""

from regress.demo.history import DemoRepo, build_demo_repo
from regress.demo.run import DemoEvent, DemoResult, run_demo

__all__ = ["DemoEvent", "DemoRepo", "DemoResult", "build_demo_repo", "run_demo"]
