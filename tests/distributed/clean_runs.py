"""The run a distributed test compares with: the same config trained in one process, once per
config for the whole test session (the reference every attack must end bit-identical to)."""
import json

import es

_CENTERS: dict = {}


def clean_center(cfg):
    """The final center of ``cfg`` trained in this process, without the final evaluation."""
    key = json.dumps(cfg.to_dict(), sort_keys=True)
    if key not in _CENTERS:
        _CENTERS[key] = es.train(cfg, final_eval=False).center
    return _CENTERS[key]
