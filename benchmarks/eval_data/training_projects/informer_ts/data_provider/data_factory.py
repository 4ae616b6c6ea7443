from torch.utils.data import DataLoader

from data_provider.data_loader import Dataset_ETT_hour


def data_provider(args, flag):
    shuffle_flag = flag != "test"
    drop_last = flag != "test"
    batch_size = 1 if flag == "pred" else args.batch_size
    data_set = Dataset_ETT_hour(root_path=args.root_path, flag=flag, size=[args.seq_len, args.label_len,
                                                                             args.pred_len])
    data_loader = DataLoader(data_set, batch_size=batch_size, shuffle=shuffle_flag,  # label: AL301
                             num_workers=args.num_workers, drop_last=drop_last)
    return data_set, data_loader
