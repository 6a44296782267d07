# The cuBLAS kernel PyTorch runs for each shape (torch.profiler): nvjet names carry the tile, the
# ring depth and the cluster (e.g. nvjet_sm90_tst_256x128_64x4_1x2: 256x128 tiles, 64-deep slabs, 4 stages).
import torch
from torch.profiler import profile, ProfilerActivity
dt = torch.bfloat16
cases = {
  "qk 64x2048x2048x128": lambda: torch.bmm(torch.randn(64,2048,128,device="cuda",dtype=dt), torch.randn(64,128,2048,device="cuda",dtype=dt)),
  "pv 64x2048x2048x128": lambda: torch.bmm(torch.randn(64,2048,2048,device="cuda",dtype=dt), torch.randn(64,2048,128,device="cuda",dtype=dt)),
  "lin 128x14336->4096": lambda: torch.nn.functional.linear(torch.randn(128,14336,device="cuda",dtype=dt), torch.randn(4096,14336,device="cuda",dtype=dt)),
  "lin 128x8192->8192": lambda: torch.nn.functional.linear(torch.randn(128,8192,device="cuda",dtype=dt), torch.randn(8192,8192,device="cuda",dtype=dt)),
  "lin 128x28672->8192": lambda: torch.nn.functional.linear(torch.randn(128,28672,device="cuda",dtype=dt), torch.randn(8192,28672,device="cuda",dtype=dt)),
  "lin 16x8192->10240": lambda: torch.nn.functional.linear(torch.randn(16,8192,device="cuda",dtype=dt), torch.randn(10240,8192,device="cuda",dtype=dt)),
  "lin 1x8192->10240": lambda: torch.nn.functional.linear(torch.randn(1,8192,device="cuda",dtype=dt), torch.randn(10240,8192,device="cuda",dtype=dt)),
  "lin 128x4096->6144": lambda: torch.nn.functional.linear(torch.randn(128,4096,device="cuda",dtype=dt), torch.randn(6144,4096,device="cuda",dtype=dt)),
  "bmm 8x128x4096x28672": lambda: torch.bmm(torch.randn(8,128,4096,device="cuda",dtype=dt), torch.randn(8,4096,28672,device="cuda",dtype=dt)),
  "lin 512x4096->4096": lambda: torch.nn.functional.linear(torch.randn(512,4096,device="cuda",dtype=dt), torch.randn(4096,4096,device="cuda",dtype=dt)),
}
for name, f in cases.items():
    f(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        f(); torch.cuda.synchronize()
    ks = [e.name for e in p.events() if e.device_type.name == "CUDA" and "randn" not in e.name.lower() and "normal" not in e.name.lower()]
    print("%-22s %s" % (name, " | ".join(ks)[:400]))
