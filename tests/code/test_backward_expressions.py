"""A backward of an arithmetic expression (PPO's `(value_loss * c + action_loss - entropy * c).backward()`)
makes the loop a training loop and starts the tensors from the operands the loop computes, not from a
coefficient set before it."""

from __future__ import annotations

from archlint.code.engine import lint_text

PPO = """import torch


def update(policy, optimizer, rollouts, advantages, value_coef):
    entropy_coef = 0.01
    totals = [0.0, 0.0]
    for epoch in range(4):
        for obs, returns, old_log_probs, adv in rollouts.minibatches(advantages):
            values, log_probs, entropy = policy.evaluate(obs)
            ratio = torch.exp(log_probs - old_log_probs)
            action_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
            value_loss = (returns - values).pow(2).mean()
            optimizer.zero_grad()
            (value_loss * value_coef + action_loss - entropy * entropy_coef).backward()
            optimizer.step()
            print("coefficients", value_coef, entropy_coef)
            {ACCUMULATE}
    return totals


def main(policy, optimizer, rollouts, advantages):
    policy.to("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        update(policy, optimizer, rollouts, advantages, 0.5)
"""

SYNCED = "totals[0] += value_loss.item(); totals[1] += action_loss.item()"
ON_DEVICE = "totals[0] += value_loss.detach(); totals[1] += action_loss.detach()"


def _al401(text: str) -> list[int]:
    return [d.line for d in lint_text(text, "ppo.py") if d.code == "AL401"]


def test_item_of_an_operand_of_the_backward_is_a_sync_every_step():
    assert _al401(PPO.replace("{ACCUMULATE}", SYNCED)) == [17, 17]  # both .item() calls


def test_negative_twin_keeps_the_losses_on_the_device():
    # the print of the coefficients (floats set outside the loop) is no sync either
    assert _al401(PPO.replace("{ACCUMULATE}", ON_DEVICE)) == []
