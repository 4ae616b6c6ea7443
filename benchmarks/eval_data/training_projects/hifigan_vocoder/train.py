"""GAN vocoder training in the layout of a HiFi-GAN-style repository (one discriminator kept for brevity)."""
import argparse
import glob
import itertools
import os
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from meldataset import MelDataset, mel_spectrogram
from models import Generator, MultiPeriodDiscriminator, discriminator_loss, feature_loss, generator_loss

torch.backends.cudnn.benchmark = True


def train(a):
    device = torch.device("cuda:0")
    generator = Generator().to(device)
    mpd = MultiPeriodDiscriminator().to(device)
    optim_g = torch.optim.AdamW(generator.parameters(), a.learning_rate, betas=(0.8, 0.99))
    optim_d = torch.optim.AdamW(mpd.parameters(), a.learning_rate, betas=(0.8, 0.99))
    files = sorted(glob.glob(os.path.join(a.input_wavs_dir, "*.wav")))
    trainset = MelDataset(files)
    train_loader = DataLoader(trainset, num_workers=a.num_workers, shuffle=True, batch_size=a.batch_size,
                              pin_memory=True, drop_last=True)
    steps = 0
    loss_dict = {}
    totals = {}
    generator.train()
    mpd.train()
    for epoch in range(a.training_epochs):
        start = time.time()
        for i, batch in enumerate(train_loader):  # label: AL403
            x, y = batch
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True).unsqueeze(1)
            y_g_hat = generator(x)
            y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1))

            optim_d.zero_grad()
            y_df_hat_r, y_df_hat_g, _, _ = mpd(y, y_g_hat.detach())
            loss_disc_f, losses_disc_f_r, losses_disc_f_g = discriminator_loss(y_df_hat_r, y_df_hat_g)
            loss_disc_f.backward()
            optim_d.step()
            loss_dict["disc"] = loss_disc_f

            optim_g.zero_grad()
            loss_mel = F.l1_loss(x, y_g_hat_mel) * 45
            y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = mpd(y, y_g_hat)
            loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
            loss_gen_f, losses_gen_f = generator_loss(y_df_hat_g)
            loss_gen_all = loss_gen_f + loss_fm_f + loss_mel
            loss_gen_all.backward()
            optim_g.step()
            loss_dict["gen"] = loss_gen_all
            loss_dict["mel"] = loss_mel

            for name in loss_dict:
                totals[name] = totals.get(name, 0.0) + loss_dict[name].item()  # label: AL401
            if steps % a.stdout_interval == 0:
                print("Steps : {:d}, Gen Loss Total : {:4.3f}, s/b : {:4.3f}".format(
                    steps, loss_gen_all, time.time() - start))
            if steps % a.checkpoint_interval == 0 and steps != 0:
                torch.save({"generator": generator.state_dict()}, os.path.join(a.checkpoint_path, f"g_{steps:08d}"))
            steps += 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_wavs_dir", default="LJSpeech-1.1/wavs")
    parser.add_argument("--checkpoint_path", default="cp_hifigan")
    parser.add_argument("--training_epochs", default=3100, type=int)
    parser.add_argument("--stdout_interval", default=5, type=int)
    parser.add_argument("--checkpoint_interval", default=5000, type=int)
    parser.add_argument("--learning_rate", default=2e-4, type=float)
    parser.add_argument("--batch_size", default=16, type=int)
    parser.add_argument("--num_workers", default=4, type=int)
    train(parser.parse_args())
