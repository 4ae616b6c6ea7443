"""The Trainer: depth and pose networks, photometric reprojection loss, logging."""
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

import networks
from datasets import KITTIRAWDataset


class Trainer:
    def __init__(self, options):
        self.opt = options
        self.device = torch.device("cpu" if self.opt.no_cuda else "cuda")
        self.models = {"encoder": networks.ResnetEncoder(18), "depth": None}
        self.models["depth"] = networks.DepthDecoder(self.models["encoder"].num_ch_enc)
        params = []
        for model in self.models.values():
            model.to(self.device)
            params += list(model.parameters())
        self.model_optimizer = torch.optim.Adam(params, self.opt.learning_rate)
        train_dataset = KITTIRAWDataset(self.opt.data_path, self.opt.height, self.opt.width, is_train=True)
        self.train_loader = DataLoader(train_dataset, self.opt.batch_size, True, num_workers=self.opt.num_workers,
                                       pin_memory=True, drop_last=True)
        self.depth_metric_names = ["de/abs_rel", "de/sq_rel", "de/rms", "de/log_rms", "da/a1"]
        self.step = 0

    def set_train(self):
        for m in self.models.values():
            m.train()

    def train(self):
        self.start_time = time.time()
        for self.epoch in range(self.opt.num_epochs):
            self.run_epoch()

    def run_epoch(self):
        self.set_train()
        for batch_idx, inputs in enumerate(self.train_loader):  # label: AL403
            before_op_time = time.time()
            outputs, losses = self.process_batch(inputs)
            self.model_optimizer.zero_grad()
            losses["loss"].backward()
            self.model_optimizer.step()
            duration = time.time() - before_op_time
            self.compute_depth_losses(inputs, outputs, losses)
            if batch_idx % self.opt.log_frequency == 0 and self.step < 2000:
                print(f"epoch {self.epoch} batch {batch_idx} loss {losses['loss'].cpu().data:.5f} {duration:.3f}s")
            self.step += 1

    def process_batch(self, inputs):
        for key, ipt in inputs.items():
            inputs[key] = ipt.to(self.device)  # label: AL302
        features = self.models["encoder"](inputs[("color_aug", 0, 0)])
        outputs = self.models["depth"](features)
        losses = self.compute_losses(inputs, outputs)
        return outputs, losses

    def compute_losses(self, inputs, outputs):
        disp = outputs[("disp", 0)]
        target = inputs[("color", 0, 0)]
        pred = F.interpolate(disp, target.shape[-2:], mode="bilinear", align_corners=False)
        mean_disp = pred.mean(2, True).mean(3, True)
        norm_disp = pred / (mean_disp + 1e-7)
        grad_x = torch.abs(norm_disp[:, :, :, :-1] - norm_disp[:, :, :, 1:])
        reprojection = torch.abs(target - inputs[("color", 1, 0)]).mean(1, True)
        return {"loss": reprojection.mean() + 1e-3 * grad_x.mean()}

    def compute_depth_losses(self, inputs, outputs, losses):
        depth_pred = torch.clamp(F.interpolate(outputs[("disp", 0)], [375, 1242], mode="bilinear",
                                               align_corners=False), 1e-3, 80).detach()
        depth_gt = inputs["depth_gt"]
        mask = depth_gt > 0
        depth_gt = depth_gt[mask]  # label: AL401
        depth_pred = depth_pred[mask]  # label: AL401
        depth_pred *= torch.median(depth_gt) / torch.median(depth_pred)
        depth_pred = torch.clamp(depth_pred, min=1e-3, max=80)
        thresh = torch.max(depth_gt / depth_pred, depth_pred / depth_gt)
        abs_rel = torch.mean(torch.abs(depth_gt - depth_pred) / depth_gt)
        sq_rel = torch.mean((depth_gt - depth_pred) ** 2 / depth_gt)
        rmse = torch.sqrt(((depth_gt - depth_pred) ** 2).mean())
        rmse_log = torch.sqrt(((torch.log(depth_gt) - torch.log(depth_pred)) ** 2).mean())
        a1 = (thresh < 1.25).float().mean()
        for i, metric in enumerate(self.depth_metric_names):
            losses[metric] = np.array([abs_rel, sq_rel, rmse, rmse_log, a1][i].cpu())  # label: AL401
