"""Named-entity recognition with a BiLSTM-CRF, in the layout of a sequence-labelling toolkit
(main.py, model/, utils/): batches built by a project function from index lists, no DataLoader."""
import argparse
import random
import time

import torch
import torch.optim as optim

from model.seqlabel import SeqLabel
from utils.data import Data, batchify_with_label


def predict_check(pred_variable, gold_variable, mask_variable):
    pred = pred_variable.cpu().data.numpy()  # label: AL401
    gold = gold_variable.cpu().data.numpy()  # label: AL401
    mask = mask_variable.cpu().data.numpy()  # label: AL401
    overlapped = (pred == gold)
    right_token = (overlapped * mask).sum()
    total_token = mask.sum()
    return right_token, total_token


def train(data, verbose=0):
    model = SeqLabel(data)
    if data.HP_gpu:
        model = model.cuda()
    optimizer = optim.SGD(model.parameters(), lr=data.HP_lr, momentum=data.HP_momentum, weight_decay=data.HP_l2)
    for idx in range(data.HP_iteration):
        epoch_start = time.time()
        random.shuffle(data.train_Ids)
        model.train()
        model.zero_grad()
        sample_loss = total_loss = right_token = whole_token = 0
        train_num = len(data.train_Ids)
        total_batch = train_num // data.HP_batch_size + 1
        for batch_id in range(total_batch):  # label: AL403
            start, end = batch_id * data.HP_batch_size, min((batch_id + 1) * data.HP_batch_size, train_num)
            instance = data.train_Ids[start:end]
            if not instance:
                continue
            batch_word, batch_wordlen, batch_wordrecover, batch_label, mask = batchify_with_label(instance, data.HP_gpu)
            loss, tag_seq = model.calculate_loss(batch_word, batch_wordlen, batch_label, mask)
            right, whole = predict_check(tag_seq, batch_label, mask)
            right_token += right
            whole_token += whole
            sample_loss += loss.item()  # label: AL401
            total_loss += loss.item()  # label: AL401
            if verbose > 0:
                print(f"     batch {batch_id}: loss {loss.item():.4f}")
            if end % 500 == 0:
                print(f"     Instance: {end}; Time: {time.time() - epoch_start:.2f}s; loss: {sample_loss:.4f}; "
                      f"acc: {right_token}/{whole_token}={(right_token + 0.) / whole_token:.4f}")
                sample_loss = 0
            loss.backward()
            optimizer.step()
            model.zero_grad()
        print(f"Epoch: {idx} training finished. Time: {time.time() - epoch_start:.2f}s, total loss: {total_loss}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Tuning with NCRF++")
    parser.add_argument("--train", default="data/conll03/train.bmes")
    parser.add_argument("--verbose", type=int, default=0)
    args = parser.parse_args()
    data = Data()
    data.HP_gpu = torch.cuda.is_available()
    data.build_alphabet(args.train)
    data.generate_instance(args.train)
    train(data, verbose=args.verbose)
