import time, torch
from nailseg_common.training.unet import create_model, segmentation_loss
torch.manual_seed(0)
def bench(side, cl, loss_fn, n=10):
    m = create_model("tu-efficientnet_lite0", "imagenet")
    opt = torch.optim.AdamW(m.parameters(), 1e-3)
    x = torch.randn(8, 3, side, side); y = (torch.rand(8, 1, side, side) > 0.9).float()
    if cl:
        m = m.to(memory_format=torch.channels_last); x = x.contiguous(memory_format=torch.channels_last)
    ts = []; tl=[]
    for i in range(n):
        t = time.perf_counter()
        out = m(x); t1=time.perf_counter()
        loss = loss_fn(out, y); t2=time.perf_counter()
        opt.zero_grad(); loss.backward(); opt.step()
        ts.append(time.perf_counter() - t); tl.append(t2-t1)
    ts = sorted(ts[3:]); tl=sorted(tl[3:])
    print(side, cl, loss_fn.__name__, f"step {ts[len(ts)//2]:.3f} s, loss fwd {tl[len(tl)//2]:.3f}", flush=True)
for side in (128,160):
    for cl in (False, True):
        bench(side, cl, segmentation_loss)
