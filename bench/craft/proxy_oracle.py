"""How informative is the counterfactual proxy? Drive hwy-test with argmax_m S(m) (no learning).

    nice -n 5 .venv/bin/python -P bench/craft/proxy_oracle.py [cv|log-free]

Each second the ego executes the candidate with the highest proxy score S(m) (constant-velocity
lane-keeping forecasts, 10 nearest agents, route term), the planner the proxy would be if the
policy followed it exactly. Prints DS / SR overall and per family (output: proxy_oracle_output.txt).
"""

from __future__ import annotations

import numpy as np
import torch

from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import vocab
from methodkit.core.sim.highway.road import segments_of
from methodkit.core.sim.highway.simulate import FRAME_S, rollout
from methodkit.core.sim.highway.state import pack
from methodkit.tools.craft import collect, evaluate, proxy, suites


class _Now:
    """The decision-time part of collect.Decisions that proxy.group_scores reads (one agent state)."""

    def __init__(self, state, running):
        ego, near = None, collect._nearest_agents(state, running)
        slot = np.maximum(near, 0)
        b = running[:, None]
        self.agents = np.stack([state.veh[b, f, slot] for f in (K.X, K.Y, K.H, K.LEN, K.WID)], -1)[:, :, None]
        self.agent_speed = (state.veh[b, K.V, slot] * np.cos(state.veh[b, K.H, slot]))[:, :, None]
        self.present = (state.present[b, slot] & (near >= 0))[:, :, None]
        self.static = state.kind[b, slot] == K.OBSTACLE
        self.ego = np.zeros((running.size, 1, 5))
        self.ego[:, 0, 0], self.ego[:, 0, 1], self.ego[:, 0, 2] = (state.veh[running, f, 0] for f in (K.X, K.Y, K.H))
        self.ego_size = state.veh[running][:, [K.LEN, K.WID], 0]
        self.plans = np.stack([vocab.plans(state, e, FRAME_S) for e in running])
        lane, _ = vocab.targets(state, running)
        self.lane_move = lane - state.lanes[running, K.CUR, 0][:, None]
        ego_obs = np.zeros((state.batch, 5))
        near_obs = np.zeros((state.batch, 8, 6))
        K.observe_batch_serial(state.veh, state.kind, state.lanes, state.lanes_t, state.road_i, state.road_f, 8,
                               5 * K.MAX_SPEED, ego_obs, near_obs)  # fmt: skip
        self.route_delta = np.rint(ego_obs[running, 4] * 2).astype(np.int64)
        roads = [segments_of(state.lanes_t[e], state.road_i[e]) for e in running]
        s_max = max(r.shape[0] for r in roads)
        self.road = np.zeros((running.size, s_max, 5))
        self.road_mask = np.zeros((running.size, s_max), dtype=bool)
        for i, r in enumerate(roads):
            self.road[i, : r.shape[0]], self.road_mask[i, : r.shape[0]] = r, True
        del ego

    def __len__(self):
        return self.plans.shape[0]


def main():
    torch.set_num_threads(1)
    routes = suites.builtin("hwy-test")
    scenes, ids = suites.scenes(routes)
    rows = []
    for start in range(0, len(scenes), 64):
        part = scenes[start : start + 64]
        state = pack(part)

        def fn(sim, running):
            s, _, _ = proxy.group_scores(_Now(sim.state, running), "cv")
            return vocab.TIE_ORDER[np.argmax(s[:, vocab.TIE_ORDER], axis=1)]

        out = rollout(state, fn, record=True)
        from methodkit.core.sim.highway import suite as sim_suite

        for b in range(state.batch):
            rec = out.record(b)
            rec["speeds"] = np.gradient(rec["boxes"][..., :2], FRAME_S, axis=0)
            rec["events"] = np.array(rec["events"], dtype=np.int64).reshape(-1, 3)
            m = sim_suite.exit_route_metrics(rec, comfort=False)
            rows.append(
                {
                    "family": routes[start + b]["family"],
                    "ds": m.ds,
                    "rc": m.rc,
                    "success": m.success,
                    "efficiency": np.nan,
                    "comfort": np.nan,
                    **{f"n_{k}": v for k, v in m.infractions.items()},
                }
            )
    summary = evaluate.summarize(rows)
    fams = " ".join(f"{k}={v['ds']:.1f}" for k, v in summary["families"].items())
    print(f"proxy-argmax hwy-test DS {summary['ds']:.2f} SR {summary['sr']:.1f} {fams}")
    print(f"infractions {summary['infractions']}")


if __name__ == "__main__":
    main()
