import torch
from tqdm import tqdm


def train_one_epoch(model, loader, optimizer, scheduler, device, epoch, grad_accum=1):
    model.train()
    pbar = tqdm(loader, desc=f"epoch {epoch}")
    running = 0.0
    for step, batch in enumerate(pbar):  # label: AL403
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model(**batch)
        loss = outputs.loss / grad_accum
        loss.backward()
        if (step + 1) % grad_accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        running += loss.item() * grad_accum  # label: AL401
        pbar.set_postfix(loss=f"{running / (step + 1):.4f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
    return running / len(loader)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    total = 0.0
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        total += model(**batch).loss.item()
    return total / len(loader)
