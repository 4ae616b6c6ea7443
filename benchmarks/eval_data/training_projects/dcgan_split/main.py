import argparse
import random

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import torch.utils.data
import torchvision.datasets as dset
import torchvision.transforms as transforms
import torchvision.utils as vutils

from models import Discriminator, Generator, nz

parser = argparse.ArgumentParser()
parser.add_argument("--dataroot", default="data")
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--batchSize", type=int, default=64)
parser.add_argument("--niter", type=int, default=25)
parser.add_argument("--accel", action="store_true")
opt = parser.parse_args()

random.seed(999)
torch.manual_seed(999)
cudnn.benchmark = True

dataset = dset.CIFAR10(root=opt.dataroot, download=True, transform=transforms.Compose([
    transforms.Resize(64), transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))]))
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize,  # label: AL301
                                         shuffle=True, num_workers=int(opt.workers))

if opt.accel and torch.accelerator.is_available():
    device = torch.accelerator.current_accelerator()
else:
    device = torch.device("cpu")

netG = Generator().to(device)
netD = Discriminator().to(device)
criterion = nn.BCELoss()
fixed_noise = torch.randn(opt.batchSize, nz, 1, 1, device=device)
real_label, fake_label = 1, 0
optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))

for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):  # label: AL403
        netD.zero_grad()
        real_cpu = data[0].to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output.view(-1), label)
        errD_real.backward()
        D_x = output.mean().item()  # label: AL401

        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output.view(-1), label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()  # label: AL401
        errD = errD_real + errD_fake
        optimizerD.step()

        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output.view(-1), label)
        errG.backward()
        D_G_z2 = output.mean().item()  # label: AL401
        optimizerG.step()

        print("[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f"
              % (epoch, opt.niter, i, len(dataloader), errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))  # label: AL401
        if i % 100 == 0:
            vutils.save_image(real_cpu, "real_samples.png", normalize=True)
