"""``python -m bench``: run every benchmark in turn and print its results."""

from bench import (
    api_codec,
    apiserver,
    apiservers,
    autoscaling,
    cni,
    controllers,
    datapath,
    ha,
    kubelet,
    netpol,
    nftproxy,
    proxy,
    pulls,
    scheduler,
    story,
    trace,
    users,
)

for benchmark in (api_codec, apiserver, ha, apiservers):
    benchmark.main()
scheduler.main([])
users.main([])
controllers.main()
autoscaling.main()
cni.main([])
kubelet.main([])
story.main([])
# nft (Debian's default) cannot restore 10,000 Services in reasonable time: see bench/README.md.
proxy.main(["--backend", "legacy"])
nftproxy.main([])
datapath.main([])
netpol.main([])
pulls.main([])
trace.main([])  # brings up a lab of its own
