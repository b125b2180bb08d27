# psrt port of the in-graph client of a Docker Compose TF cluster:
#   origin:  https://github.com/denverdino/tensorflow-docker
#   path:    client.py
#   commit:  81caf07274046229b55aea7db18f29de75146696
# Style: a client outside the cluster builds a linear model y = w * x + b, opens
# tf.Session("grpc://<a task of the cluster>") and trains it there one sample at a time:
# the target server knows its cluster; the client passes no cluster definition.
#
# What changed, and only this (the port was written from reading the original):
# * imports: psrt for tensorflow;
# * the model: tf.mul(X, w) and tf.square(...) as tensor operators (tf.mul is TF 0.x's
#   name of tf.multiply);
# * the target: the original's fixed "grpc://localhost:8080" (a port docker-compose
#   publishes) is read from the TARGET environment variable when it is set; and the
#   training data are seeded (the original draws them unseeded).
import os

import psrt as tf
import numpy as np

np.random.seed(0)
train_X = np.linspace(-1, 1, 101)
train_Y = 2 * train_X + np.random.randn(*train_X.shape) * 0.33 + 10

X = tf.placeholder("float")
Y = tf.placeholder("float")
w = tf.Variable(0.0, name="weight")
b = tf.Variable(0.0, name="reminder")

init_op = tf.initialize_all_variables()
cost_op = (Y - X * w - b) ** 2
train_op = tf.train.GradientDescentOptimizer(0.01).minimize(cost_op)

with tf.Session(os.environ.get("TARGET", "grpc://localhost:8080")) as sess:
    with tf.device("/job:worker/task:0"):
        sess.run(init_op)
        for i in range(10):
            for (x, y) in zip(train_X, train_Y):
                sess.run(train_op, feed_dict={X: x, Y: y})
        
        print(sess.run(w))
        print(sess.run(b))
