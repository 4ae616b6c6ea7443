"""diffusers' UNets and VAEs are convolutional models (AL303 asks for cudnn.benchmark in a script that
trains one); its transformers (DiT) are not."""

from __future__ import annotations

from archlint.code.engine import lint_text

SCRIPT = """import torch
import torch.nn.functional as F
from accelerate import Accelerator
from diffusers import DDPMScheduler, {MODEL}


def main(dataloader):
{SETTING}    accelerator = Accelerator(mixed_precision="bf16")
    model = {BUILD}
    scheduler = DDPMScheduler(num_train_timesteps=1000)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)
    for batch in dataloader:
        noise = torch.randn_like(batch)
        t = torch.randint(0, 1000, (batch.shape[0],), device=batch.device)
        loss = F.mse_loss(model(scheduler.add_noise(batch, noise, t), t).sample, noise)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main(None)
"""


def _al303(model: str, build: str, setting: str = "") -> list[int]:
    text = SCRIPT.replace("{MODEL}", model).replace("{BUILD}", build).replace("{SETTING}", setting)
    return [d.line for d in lint_text(text, "train_unconditional.py") if d.code == "AL303"]


def test_unet_is_convolutional():
    assert _al303("UNet2DModel", "UNet2DModel(sample_size=64)") == [22]
    assert _al303("UNet2DConditionModel", 'UNet2DConditionModel.from_pretrained("x", subfolder="unet")') == [22]


def test_negative_twins():
    assert _al303("UNet2DModel", "UNet2DModel(sample_size=64)", "    torch.backends.cudnn.benchmark = True\n") == []
    assert _al303("DiTTransformer2DModel", "DiTTransformer2DModel(sample_size=32)") == []
