"""ESRGAN training, written as a flat script (no __main__ guard) in the layout of a GAN-zoo repository."""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.utils.data import DataLoader
from torchvision.utils import save_image

from datasets import ImageDataset
from models import Discriminator, FeatureExtractor, GeneratorRRDB

os.makedirs("images/training", exist_ok=True)
os.makedirs("saved_models", exist_ok=True)

parser = argparse.ArgumentParser()
parser.add_argument("--epoch", type=int, default=0)
parser.add_argument("--n_epochs", type=int, default=200)
parser.add_argument("--dataset_name", type=str, default="img_align_celeba")
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--lr", type=float, default=0.0002)
parser.add_argument("--n_cpu", type=int, default=8)
parser.add_argument("--hr_height", type=int, default=256)
parser.add_argument("--hr_width", type=int, default=256)
parser.add_argument("--channels", type=int, default=3)
parser.add_argument("--sample_interval", type=int, default=100)
parser.add_argument("--warmup_batches", type=int, default=500)
parser.add_argument("--lambda_adv", type=float, default=5e-3)
parser.add_argument("--lambda_pixel", type=float, default=1e-2)
opt = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
hr_shape = (opt.hr_height, opt.hr_width)

generator = GeneratorRRDB(opt.channels, filters=64, num_res_blocks=23).to(device)
discriminator = Discriminator(input_shape=(opt.channels, *hr_shape)).to(device)
feature_extractor = FeatureExtractor().to(device)
feature_extractor.eval()

criterion_GAN = torch.nn.BCEWithLogitsLoss().to(device)
criterion_content = torch.nn.L1Loss().to(device)
criterion_pixel = torch.nn.L1Loss().to(device)

optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(0.9, 0.999))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=opt.lr, betas=(0.9, 0.999))

Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.Tensor

dataloader = DataLoader(  # label: AL301
    ImageDataset("../../data/%s" % opt.dataset_name, hr_shape=hr_shape),
    batch_size=opt.batch_size,
    shuffle=True,
    num_workers=opt.n_cpu,
)

for epoch in range(opt.epoch, opt.n_epochs):  # label: AL303
    for i, imgs in enumerate(dataloader):  # label: AL403
        batches_done = epoch * len(dataloader) + i

        imgs_lr = Variable(imgs["lr"].type(Tensor))
        imgs_hr = Variable(imgs["hr"].type(Tensor))

        valid = Variable(Tensor(np.ones((imgs_lr.size(0), *discriminator.output_shape))), requires_grad=False)
        fake = Variable(Tensor(np.zeros((imgs_lr.size(0), *discriminator.output_shape))), requires_grad=False)

        optimizer_G.zero_grad()
        gen_hr = generator(imgs_lr)
        loss_pixel = criterion_pixel(gen_hr, imgs_hr)

        if batches_done < opt.warmup_batches:
            loss_pixel.backward()
            optimizer_G.step()
            print("[Epoch %d/%d] [Batch %d/%d] [G pixel: %f]"
                  % (epoch, opt.n_epochs, i, len(dataloader), loss_pixel.item()))
            continue

        pred_real = discriminator(imgs_hr).detach()
        pred_fake = discriminator(gen_hr)
        loss_GAN = criterion_GAN(pred_fake - pred_real.mean(0, keepdim=True), valid)
        gen_features = feature_extractor(gen_hr)
        real_features = feature_extractor(imgs_hr).detach()
        loss_content = criterion_content(gen_features, real_features)
        loss_G = loss_content + opt.lambda_adv * loss_GAN + opt.lambda_pixel * loss_pixel
        loss_G.backward()
        optimizer_G.step()

        optimizer_D.zero_grad()
        pred_real = discriminator(imgs_hr)
        pred_fake = discriminator(gen_hr.detach())
        loss_real = criterion_GAN(pred_real - pred_fake.mean(0, keepdim=True), valid)
        loss_fake = criterion_GAN(pred_fake - pred_real.mean(0, keepdim=True), fake)
        loss_D = (loss_real + loss_fake) / 2
        loss_D.backward()
        optimizer_D.step()

        print(
            "[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f, content: %f, adv: %f, pixel: %f]"
            % (epoch, opt.n_epochs, i, len(dataloader), loss_D.item(), loss_G.item(), loss_content.item(),  # label: AL401
               loss_GAN.item(), loss_pixel.item())  # label: AL401
        )

        if batches_done % opt.sample_interval == 0:
            save_image(nn.functional.interpolate(imgs_lr, scale_factor=4), "images/training/%d.png" % batches_done)
    torch.save(generator.state_dict(), "saved_models/generator_%d.pth" % epoch)
