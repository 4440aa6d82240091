import time, contextlib
import test_sql_steps as m
def wrap(obj, name, key):
    f = getattr(obj, name)
    def g(*a, **k):
        t=time.perf_counter()
        try: return f(*a, **k)
        finally: print(f"  [{key} {time.perf_counter()-t:.1f}s]", end="")
    setattr(obj, name, g)
wrap(m, "assert_oracle", "oracle")
from ivm_assets import project as P
wrap(P.IvmProject, "refresh", "refresh")
