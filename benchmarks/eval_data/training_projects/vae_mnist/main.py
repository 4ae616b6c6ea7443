"""Variational autoencoder on MNIST, one script, in the manner of the PyTorch examples' VAE."""
import argparse

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F
from torchvision import datasets, transforms
from torchvision.utils import save_image

parser = argparse.ArgumentParser(description="VAE MNIST Example")
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--no-cuda", action="store_true", default=False)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--log-interval", type=int, default=10)
args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()
torch.manual_seed(args.seed)
device = torch.device("cuda" if args.cuda else "cpu")

kwargs = {"num_workers": 1, "pin_memory": True} if args.cuda else {}
train_set = datasets.MNIST("../data", train=True, download=True, transform=transforms.ToTensor())
train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True, **kwargs)
test_loader = torch.utils.data.DataLoader(
    datasets.MNIST("../data", train=False, transform=transforms.ToTensor()),
    batch_size=args.batch_size, shuffle=False, **kwargs)

# A pass over the training images on the host, to report their size and mean intensity once.
stats_loader = torch.utils.data.DataLoader(train_set, batch_size=1000, shuffle=False)
n_images, pixel_sum = 0, 0.0
for imgs, _ in stats_loader:
    n_images += imgs.shape[0]
    pixel_sum += float(imgs.sum())
print(f"{n_images} images, mean intensity {pixel_sum / (n_images * 784):.4f}")


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


def loss_terms(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce, kld


def train(epoch):
    model.train()
    train_loss = 0
    terms = {}
    history = []
    for batch_idx, (data, _) in enumerate(train_loader):  # label: AL403
        data = data.to(device)  # label: AL302
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        bce, kld = loss_terms(recon_batch, data, mu, logvar)
        terms["bce"] = bce
        terms["kld"] = kld
        loss = bce + kld
        loss.backward()
        train_loss += loss.item()  # label: AL401
        optimizer.step()
        history.append({k: v.item() / len(data) for k, v in terms.items()})  # label: AL401
        if batch_idx % args.log_interval == 0:
            print("Train Epoch: {} [{}/{}]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_loader.dataset), loss.item() / len(data)))
    print("====> Epoch: {} Average loss: {:.4f}".format(epoch, train_loss / len(train_loader.dataset)))
    return history


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)  # label: AL302
            recon_batch, mu, logvar = model(data)
            bce, kld = loss_terms(recon_batch, data, mu, logvar)
            test_loss += (bce + kld).item()
            if i == 0:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(args.batch_size, 1, 28, 28)[:n]])
                save_image(comparison.cpu(), "results/reconstruction_" + str(epoch) + ".png", nrow=n)
    print("====> Test set loss: {:.4f}".format(test_loss / len(test_loader.dataset)))


if __name__ == "__main__":
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = torch.randn(64, 20).to(device)
            sample = model.decode(sample).cpu()
            save_image(sample.view(64, 1, 28, 28), "results/sample_" + str(epoch) + ".png")
