import torch
import torch.nn as nn
from torchvision.models import vgg19


class FeatureExtractor(nn.Module):
    def __init__(self):
        super().__init__()
        vgg19_model = vgg19(weights=None)
        self.vgg19_54 = nn.Sequential(*list(vgg19_model.features.children())[:35])

    def forward(self, img):
        return self.vgg19_54(img)


class DenseResidualBlock(nn.Module):
    def __init__(self, filters, res_scale=0.2):
        super().__init__()
        self.res_scale = res_scale

        def block(in_features, non_linearity=True):
            layers = [nn.Conv2d(in_features, filters, 3, 1, 1, bias=True)]
            if non_linearity:
                layers += [nn.LeakyReLU()]
            return nn.Sequential(*layers)

        self.b1 = block(1 * filters)
        self.b2 = block(2 * filters)
        self.b3 = block(3 * filters, non_linearity=False)

    def forward(self, x):
        inputs = x
        for blk in (self.b1, self.b2):
            out = blk(inputs)
            inputs = torch.cat([inputs, out], 1)
        return self.b3(inputs).mul(self.res_scale) + x


class GeneratorRRDB(nn.Module):
    def __init__(self, channels, filters=64, num_res_blocks=16, num_upsample=2):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, filters, kernel_size=3, stride=1, padding=1)
        self.res_blocks = nn.Sequential(*[DenseResidualBlock(filters) for _ in range(num_res_blocks)])
        self.conv2 = nn.Conv2d(filters, filters, kernel_size=3, stride=1, padding=1)
        up = []
        for _ in range(num_upsample):
            up += [nn.Conv2d(filters, filters * 4, kernel_size=3, stride=1, padding=1), nn.LeakyReLU(),
                   nn.PixelShuffle(upscale_factor=2)]
        self.upsampling = nn.Sequential(*up)
        self.conv3 = nn.Sequential(nn.Conv2d(filters, filters, 3, 1, 1), nn.LeakyReLU(),
                                   nn.Conv2d(filters, channels, 3, 1, 1))

    def forward(self, x):
        out1 = self.conv1(x)
        out = torch.add(out1, self.conv2(self.res_blocks(out1)))
        return self.conv3(self.upsampling(out))


class Discriminator(nn.Module):
    def __init__(self, input_shape):
        super().__init__()
        self.input_shape = input_shape
        in_channels, in_height, in_width = self.input_shape
        self.output_shape = (1, in_height // 2 ** 4, in_width // 2 ** 4)
        layers = []
        for i, out_filters in enumerate([64, 128, 256, 512]):
            layers += [nn.Conv2d(in_channels, out_filters, 3, 1, 1), nn.LeakyReLU(0.2, inplace=True),
                       nn.Conv2d(out_filters, out_filters, 3, 2, 1), nn.BatchNorm2d(out_filters),
                       nn.LeakyReLU(0.2, inplace=True)]
            in_channels = out_filters
        layers.append(nn.Conv2d(out_filters, 1, kernel_size=3, stride=1, padding=1))
        self.model = nn.Sequential(*layers)

    def forward(self, img):
        return self.model(img)
