"""``tf.train.queue_runner`` (also ``tensorflow.python.training.queue_runner``):
``QueueRunner``, ``add_queue_runner``, ``start_queue_runners``. A face."""

from psrt.training.queue_runner import QueueRunner, add_queue_runner, start_queue_runners

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]
