"""The course's training entry point: ``python -m nailseg_common.train --help``.

Notebook 08 teaches the code (:mod:`nailseg_common.multi_gpu`; its options are
:mod:`nailseg_common.train_arguments`); Lightning's DDP launcher re-runs this same command
once per further device.
"""

from nailseg_common.multi_gpu import main

if __name__ == "__main__":
    main()
