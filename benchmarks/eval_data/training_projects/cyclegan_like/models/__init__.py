from models.cycle_gan_model import CycleGANModel


def create_model(opt):
    return CycleGANModel(opt)
