import torch.nn as nn


class PatchEmbed(nn.Module):
    def __init__(self, patch_size=4, in_chans=3, embed_dim=96):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        return self.norm(x)


class SwinLike(nn.Module):
    def __init__(self, num_classes=1000, embed_dim=96, depth=4):
        super().__init__()
        self.patch_embed = PatchEmbed(embed_dim=embed_dim)
        layer = nn.TransformerEncoderLayer(embed_dim, 3, embed_dim * 4, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth)
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.blocks(self.patch_embed(x))
        return self.head(self.norm(x).mean(1))


def build_model(config):
    return SwinLike(num_classes=config.MODEL.NUM_CLASSES)
