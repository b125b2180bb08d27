import numpy as np
import psrt

cluster = psrt.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
server = psrt.train.Server(cluster, job_name="worker", task_index=0)
with psrt.device(psrt.train.replica_device_setter(cluster=cluster)):
    x = psrt.placeholder(psrt.float32, [None, 784], name="x")
    W = psrt.get_variable("W", [784, 10], initializer=psrt.zeros_initializer())
    b = psrt.Variable(np.zeros([10], np.float32), name="b")
    logits = psrt.matmul(x, W) + b
    y = psrt.placeholder(psrt.float32, [None, 10], name="y")
    loss = psrt.reduce_mean(psrt.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    gs = psrt.train.get_or_create_global_step()
    opt = psrt.train.AdagradOptimizer(0.01)
    train_op = opt.minimize(loss, global_step=gs)
    psrt.summary.scalar("loss", train_op)
hooks = [psrt.train.StopAtStepHook(last_step=10)]
try:
    with psrt.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                             hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={"x": np.zeros((1, 784)), "y": np.zeros((1, 10))})
except psrt.errors.UnavailableError as e:
    print(e.message)
saver = psrt.train.Saver()
print(psrt.train.latest_checkpoint("/tmp"), psrt.errors.OpError, psrt.init_ops.Zeros,
      psrt.dynamic_embedding.get_variable, psrt.feature_column.numeric_column)
