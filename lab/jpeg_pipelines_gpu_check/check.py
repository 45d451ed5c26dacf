"""GPU check of the decoding paths (not committed): every pipeline's decoded validation batch
against the decode-once cache, on the GPU, in the gpu profile."""
def main():
    import time

    from nailseg_common.data.preparation import ensure_prepared, summary
    from nailseg_common.setup.profiles import select_profile
    t = time.time()
    cfg = select_profile("gpu")
    loc = ensure_prepared(cfg, progress=False)
    print(f"prepared in {time.time() - t:.1f} s"); print(summary(loc))
    from nailseg_common.data.decoded import cache_cost, load_cache
    from nailseg_common.pipelines.albumentations_pipeline import NailDataModule
    from nailseg_common.pipelines.dali_pipeline import DALINailDataModule
    from nailseg_common.pipelines.kornia_pipeline import DeviceDecodedNailDataModule
    print(cache_cost(loc, cfg.image_size))
    ci, cl = load_cache(loc, cfg.image_size, "valid")
    def compare(name, batch):
        n = batch["image"].shape[0]
        diff = (batch["image"].float().cpu() - ci[:n].float()).abs()
        print(f"{name}: mean abs {diff.mean():.3f}, worst photo {diff.flatten(1).mean(1).max():.3f}, "
              f"labels differing {(batch['label'].cpu() != cl[:n]).float().mean():.5f}, device {batch['image'].device}")
    dm = DeviceDecodedNailDataModule(loc, cfg, num_workers=4); dm.setup()
    compare("torchvision nvJPEG", next(iter(dm.val_dataloader())).to("cuda"))
    am = NailDataModule(loc, cfg, augment=False); am.setup()
    compare("albumentations", next(iter(am.val_dataloader())))
    for load in (None, 0.0):
        dd = DALINailDataModule(loc, cfg, hw_decoder_load=load)
        compare(f"DALI mixed hw_decoder_load={load}", next(iter(dd.val_dataloader())))


if __name__ == "__main__":
    main()
