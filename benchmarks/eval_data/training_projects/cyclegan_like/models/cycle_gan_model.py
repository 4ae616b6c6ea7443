import torch
import torch.nn as nn


class CycleGANModel:
    def __init__(self, opt):
        self.gpu_ids = opt.gpu_ids
        self.device = torch.device("cuda:{}".format(self.gpu_ids[0])) if self.gpu_ids else torch.device("cpu")
        torch.backends.cudnn.benchmark = True
        self.netG_A = nn.Sequential(nn.Conv2d(3, 64, 7, padding=3), nn.ReLU(), nn.Conv2d(64, 3, 7, padding=3)).to(self.device)
        self.netD_A = nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(64, 1, 4)).to(self.device)
        self.criterionGAN = nn.MSELoss()
        self.optimizer_G = torch.optim.Adam(self.netG_A.parameters(), lr=opt.lr, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD_A.parameters(), lr=opt.lr, betas=(0.5, 0.999))

    def set_input(self, input):
        self.real_A = input["A"].to(self.device)
        self.real_B = input["B"].to(self.device)

    def backward_G(self):
        self.fake_B = self.netG_A(self.real_A)
        pred = self.netD_A(self.fake_B)
        self.loss_G = self.criterionGAN(pred, torch.ones_like(pred))
        self.loss_G.backward()

    def backward_D(self):
        pred_real = self.netD_A(self.real_B)
        pred_fake = self.netD_A(self.fake_B.detach())
        self.loss_D = 0.5 * (self.criterionGAN(pred_real, torch.ones_like(pred_real))
                             + self.criterionGAN(pred_fake, torch.zeros_like(pred_fake)))
        self.loss_D.backward()

    def optimize_parameters(self):
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()

    def get_current_losses(self):
        return {"G": float(self.loss_G), "D": float(self.loss_D)}
