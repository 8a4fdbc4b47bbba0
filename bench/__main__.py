"""``python -m bench``: run every benchmark in turn and print its results."""

from bench import api_codec, apiserver, cni, controllers, kubelet, scheduler

for benchmark in (api_codec, apiserver):
    benchmark.main()
scheduler.main([])
controllers.main()
cni.main([])
kubelet.main([])
