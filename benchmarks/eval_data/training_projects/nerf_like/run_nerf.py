"""NeRF training, in the layout of a radiance-field repository (run_nerf.py, nerf/model.py,
nerf/render.py): rays of all training images precomputed on the GPU, a random batch each step."""
import argparse
import os

import numpy as np
import torch
from tqdm import tqdm, trange

from nerf import NeRF, get_rays, render

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def img2mse(x, y):
    return torch.mean((x - y) ** 2)


def mse2psnr(x):
    return -10.0 * torch.log10(x)


def train(args):
    images = torch.from_numpy(np.load(os.path.join(args.datadir, "images.npy"))).to(device)
    poses = torch.from_numpy(np.load(os.path.join(args.datadir, "poses.npy"))).to(device)
    H, W, focal = images.shape[1], images.shape[2], args.focal
    model = NeRF().to(device)
    model_fine = NeRF().to(device)
    optimizer = torch.optim.Adam(list(model.parameters()) + list(model_fine.parameters()), lr=args.lrate)
    render_kwargs_train = {"network_fn": model, "network_fine": model_fine, "N_samples": 64,
                           "N_importance": 128, "near": 2.0, "far": 6.0, "white_bkgd": args.white_bkgd}
    history = []
    for i in trange(0, args.N_iters + 1):  # label: AL403
        img_i = np.random.randint(images.shape[0])
        target = images[img_i]
        rays_o, rays_d = get_rays(H, W, focal, poses[img_i, :3, :4])
        coords = torch.stack(torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij"), -1).reshape(-1, 2)
        select = coords[np.random.choice(coords.shape[0], size=args.N_rand, replace=False)].long()
        rays_o = rays_o[select[:, 0], select[:, 1]]
        rays_d = rays_d[select[:, 0], select[:, 1]]
        target_s = target[select[:, 0], select[:, 1]]

        rgb, disp, acc, extras = render(rays_o, rays_d, chunk=args.chunk, **render_kwargs_train)
        optimizer.zero_grad()
        img_loss = img2mse(rgb, target_s)
        fg = acc > 0.5
        loss = img_loss + 0.1 * img2mse(extras["rgb0"][fg], target_s[fg])  # label: AL401
        psnr = mse2psnr(img_loss)
        loss.backward()
        optimizer.step()
        history.append(psnr.detach().to("cpu"))  # label: AL401

        decay_steps = args.lrate_decay * 1000
        for param_group in optimizer.param_groups:
            param_group["lr"] = args.lrate * (0.1 ** (i / decay_steps))
        if i % args.i_print == 0:
            tqdm.write(f"[TRAIN] Iter: {i} Loss: {loss.item()}  PSNR: {psnr.item()}")
        if i % args.i_weights == 0 and i > 0:
            torch.save({"global_step": i, "network_fn_state_dict": model.state_dict(),
                        "network_fine_state_dict": model_fine.state_dict()},
                       os.path.join(args.basedir, f"{i:06d}.tar"))
    return history


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--datadir", default="./data/lego")
    p.add_argument("--basedir", default="./logs")
    p.add_argument("--focal", type=float, default=1111.0)
    p.add_argument("--N_iters", type=int, default=200_000)
    p.add_argument("--N_rand", type=int, default=1024)
    p.add_argument("--chunk", type=int, default=32768)
    p.add_argument("--lrate", type=float, default=5e-4)
    p.add_argument("--lrate_decay", type=int, default=250)
    p.add_argument("--i_print", type=int, default=100)
    p.add_argument("--i_weights", type=int, default=10000)
    p.add_argument("--white_bkgd", action="store_true")
    train(p.parse_args())
