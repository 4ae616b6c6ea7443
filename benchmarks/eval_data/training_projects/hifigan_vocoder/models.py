import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, num_mels=80, ch=256):
        super().__init__()
        self.conv_pre = nn.Conv1d(num_mels, ch, 7, padding=3)
        self.ups = nn.ModuleList([nn.ConvTranspose1d(ch // 2 ** i, ch // 2 ** (i + 1), 16, 8, padding=4)
                                  for i in range(2)])
        self.ups2 = nn.ModuleList([nn.ConvTranspose1d(ch // 4 // 2 ** i, ch // 8 // 2 ** i, 4, 2, padding=1)
                                   for i in range(2)])
        self.conv_post = nn.Conv1d(ch // 16, 1, 7, padding=3)

    def forward(self, x):
        x = self.conv_pre(x)
        for up in list(self.ups) + list(self.ups2):
            x = up(F.leaky_relu(x, 0.1))
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


class PeriodDiscriminator(nn.Module):
    def __init__(self, period):
        super().__init__()
        self.period = period
        self.convs = nn.ModuleList([nn.Conv2d(1, 32, (5, 1), (3, 1)), nn.Conv2d(32, 128, (5, 1), (3, 1))])
        self.post = nn.Conv2d(128, 1, (3, 1))

    def forward(self, x):
        fmap = []
        b, c, t = x.shape
        if t % self.period:
            x = F.pad(x, (0, self.period - t % self.period), "reflect")
        x = x.view(b, c, -1, self.period)
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            fmap.append(x)
        x = self.post(x)
        fmap.append(x)
        return torch.flatten(x, 1, -1), fmap


class MultiPeriodDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.discriminators = nn.ModuleList([PeriodDiscriminator(p) for p in (2, 3, 5, 7, 11)])

    def forward(self, y, y_hat):
        y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
        for d in self.discriminators:
            y_d_r, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_rs.append(y_d_r)
            fmap_rs.append(fmap_r)
            y_d_gs.append(y_d_g)
            fmap_gs.append(fmap_g)
        return y_d_rs, y_d_gs, fmap_rs, fmap_gs


def feature_loss(fmap_r, fmap_g):
    loss = 0
    for dr, dg in zip(fmap_r, fmap_g):
        for rl, gl in zip(dr, dg):
            loss += torch.mean(torch.abs(rl - gl))
    return loss * 2


def discriminator_loss(disc_real_outputs, disc_generated_outputs):
    loss = 0
    r_losses = []
    g_losses = []
    for dr, dg in zip(disc_real_outputs, disc_generated_outputs):
        r_loss = torch.mean((1 - dr) ** 2)
        g_loss = torch.mean(dg ** 2)
        loss += r_loss + g_loss
        r_losses.append(r_loss.item())  # label: AL401
        g_losses.append(g_loss.item())  # label: AL401
    return loss, r_losses, g_losses


def generator_loss(disc_outputs):
    loss = 0
    gen_losses = []
    for dg in disc_outputs:
        l_g = torch.mean((1 - dg) ** 2)
        gen_losses.append(l_g)
        loss += l_g
    return loss, gen_losses
