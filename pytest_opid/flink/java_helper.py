"""The Java side of reading a Flink job: one class (:data:`HELPER_SOURCE`), compiled on first use
against the JVM's own class path (:class:`~pytest_opid.flink.jvm.FlinkJvm`).

It writes the whole StreamGraph as one JSON text (what decides an OperatorID or a chain; read
by :mod:`pytest_opid.flink.stream_graph`), writes Flink's own JobGraph (the tests' witness),
captures and restores an environment's transformations (PyFlink's preparation rewires them in
place), builds what ``statement_set.execute()`` or a jar's main would submit, and describes a
Java exception chain.
"""

from __future__ import annotations

__all__ = ["HELPER_CLASS", "HELPER_SOURCE"]

#: The Java side: one class, compiled on first use against the JVM's own class path.
HELPER_SOURCE = r"""
package pytestopid;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.*;

import org.apache.flink.api.dag.Pipeline;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.client.program.PackagedProgram;
import org.apache.flink.client.program.PackagedProgramUtils;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.OperatorIDPair;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.JobVertex;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamEdge;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;
import org.apache.flink.streaming.api.operators.SimpleOperatorFactory;
import org.apache.flink.streaming.api.operators.SourceOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperatorFactory;
import org.apache.flink.streaming.api.operators.legacy.YieldingOperatorFactory;
import org.apache.flink.streaming.runtime.partitioner.*;
import org.apache.flink.table.api.internal.StatementSetImpl;
import org.apache.flink.table.api.internal.TableEnvironmentImpl;
import org.apache.flink.table.delegation.Executor;

/** pytest-opid's reader of Flink stream graphs (generated code: see pytest_opid.flink.pyflink). */
public final class OpidFlinkReader {
    public OpidFlinkReader() {}

    // -- the stream graph as JSON ------------------------------------------------------------

    public StringBuilder streamGraph(StreamGraph graph) throws Exception {
        Method configured = StreamNode.class.getDeclaredMethod("isParallelismConfigured");
        configured.setAccessible(true);
        List<StreamNode> nodes = new ArrayList<>(graph.getStreamNodes());
        nodes.sort(Comparator.comparingInt(StreamNode::getId));
        Map<StreamEdge, Integer> index = new IdentityHashMap<>();
        for (StreamNode node : nodes) {
            for (StreamEdge edge : node.getOutEdges()) {
                index.putIfAbsent(edge, index.size());
            }
        }
        StringBuilder out = new StringBuilder(1024 + 400 * nodes.size());
        out.append("{\"chaining\":").append(graph.isChainingEnabled());
        out.append(",\"differentMaxParallelism\":")
                .append(graph.isChainingOfOperatorsWithDifferentMaxParallelismEnabled());
        out.append(",\"jobType\":");
        str(out, String.valueOf(graph.getJobType()));
        out.append(",\"dynamic\":").append(graph.isDynamic());
        out.append(",\"nodes\":[");
        String sep = "";
        for (StreamNode node : nodes) {
            StreamOperatorFactory<?> factory = node.getOperatorFactory();
            out.append(sep).append("{\"id\":").append(node.getId());
            sep = ",";
            out.append(",\"name\":");
            str(out, node.getOperatorName());
            out.append(",\"parallelism\":").append(node.getParallelism());
            out.append(",\"maxParallelism\":").append(node.getMaxParallelism());
            out.append(",\"configured\":").append(configured.invoke(node));
            out.append(",\"slotSharingGroup\":");
            str(out, node.getSlotSharingGroup());
            out.append(",\"uid\":");
            str(out, node.getTransformationUID());
            out.append(",\"userHash\":");
            str(out, node.getUserHash());
            out.append(",\"strategy\":");
            str(out, factory == null ? null : String.valueOf(factory.getChainingStrategy()));
            String source = null;
            if (factory instanceof SourceOperatorFactory) {
                source = "new";
            } else if (factory != null && factory.isLegacySource()) {
                source = "legacy";
            }
            out.append(",\"source\":");
            str(out, source);
            out.append(",\"yielding\":").append(factory instanceof YieldingOperatorFactory);
            out.append(",\"operator\":");
            str(out, operatorClass(factory));
            out.append(",\"keyed\":").append(node.getStatePartitioners().length > 0);
            boolean chainedSource = false;
            try {
                chainedSource = StreamingJobGraphGenerator.isChainableSource(node, graph);
            } catch (RuntimeException e) {
                // not a source Flink would chain into its consumer
            }
            out.append(",\"chainedSource\":").append(chainedSource);
            out.append(",\"out\":[");
            String edgeSep = "";
            for (StreamEdge edge : node.getOutEdges()) {
                StreamPartitioner<?> partitioner = edge.getPartitioner();
                out.append(edgeSep).append("[").append(edge.getTargetId());
                edgeSep = ",";
                out.append(",").append(edge.getTypeNumber()).append(",");
                str(out, partitionerKind(partitioner));
                out.append(",");
                str(out, String.valueOf(edge.getExchangeMode()));
                out.append(",");
                str(out, partitioner == null ? null : partitioner.getClass().getSimpleName());
                out.append("]");
            }
            out.append("],\"in\":[");
            edgeSep = "";
            for (StreamEdge edge : node.getInEdges()) {
                Integer position = index.get(edge);
                out.append(edgeSep).append(position == null ? -1 : position);
                edgeSep = ",";
            }
            out.append("]}");
        }
        out.append("]}");
        return out;
    }

    private static String operatorClass(StreamOperatorFactory<?> factory) {
        if (factory == null) {
            return null;
        }
        if (factory instanceof SimpleOperatorFactory) {
            Object operator = ((SimpleOperatorFactory<?>) factory).getOperator();
            if (operator != null) {
                return operator.getClass().getName();
            }
        }
        return factory.getClass().getName();
    }

    private static String partitionerKind(StreamPartitioner<?> p) {
        if (p instanceof ForwardForConsecutiveHashPartitioner) {
            return "FORWARD_FOR_CONSECUTIVE_HASH";
        }
        if (p instanceof ForwardPartitioner) return "FORWARD";
        if (p instanceof KeyGroupStreamPartitioner) return "HASH";
        if (p instanceof RebalancePartitioner) return "REBALANCE";
        if (p instanceof RescalePartitioner) return "RESCALE";
        if (p instanceof ShufflePartitioner) return "SHUFFLE";
        if (p instanceof BroadcastPartitioner) return "BROADCAST";
        if (p instanceof GlobalPartitioner) return "GLOBAL";
        return "CUSTOM";
    }

    private static void str(StringBuilder out, String s) {
        if (s == null) {
            out.append("null");
            return;
        }
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF) || c == 0x2028 || c == 0x2029) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }

    // -- Flink's own JobGraph, the witness of the tests ----------------------------------------

    public StringBuilder jobGraph(StreamGraph graph, ClassLoader loader) throws Exception {
        JobGraph job = loader == null ? graph.getJobGraph() : graph.getJobGraph(loader, null);
        StringBuilder out = new StringBuilder("[");
        String sep = "";
        for (JobVertex vertex : job.getVerticesSortedTopologicallyFromSources()) {
            out.append(sep).append("{\"id\":");
            sep = ",";
            str(out, vertex.getID().toHexString());
            out.append(",\"name\":");
            str(out, vertex.getName());
            out.append(",\"parallelism\":").append(vertex.getParallelism());
            out.append(",\"maxParallelism\":").append(vertex.getMaxParallelism());
            out.append(",\"operators\":[");
            String opSep = "";
            for (OperatorIDPair pair : vertex.getOperatorIDs()) {
                out.append(opSep).append("[");
                opSep = ",";
                str(out, pair.getGeneratedOperatorID().toHexString());
                out.append(",");
                str(out, pair.getUserDefinedOperatorID().map(id -> id.toHexString()).orElse(null));
                out.append("]");
            }
            out.append("]}");
        }
        return out.append("]");
    }

    // -- leaving an environment as it was ----------------------------------------------------

    public Object capture(StreamExecutionEnvironment env) throws Exception {
        List<Object[]> saved = new ArrayList<>();
        save(env, saved);
        Field field = StreamExecutionEnvironment.class.getDeclaredField("transformations");
        field.setAccessible(true);
        @SuppressWarnings("unchecked")
        List<Transformation<?>> list = (List<Transformation<?>>) field.get(env);
        Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        Deque<Transformation<?>> todo = new ArrayDeque<>(list);
        while (!todo.isEmpty()) {
            Transformation<?> t = todo.pop();
            if (seen.add(t)) {
                save(t, saved);
                todo.addAll(t.getInputs());
            }
        }
        return saved;
    }

    private static void save(Object target, List<Object[]> saved) {
        Class<?> c = target.getClass();
        for (; c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers())) {
                    continue;
                }
                Object value;
                try {
                    f.setAccessible(true);
                    value = f.get(target);
                } catch (RuntimeException | IllegalAccessException e) {
                    continue;
                }
                Object copy = null;
                if (value instanceof Collection) {
                    copy = new ArrayList<>((Collection<?>) value);
                } else if (value instanceof Map) {
                    copy = new ArrayList<>(((Map<?, ?>) value).entrySet());
                    List<Object[]> entries = new ArrayList<>();
                    for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                        entries.add(new Object[] {e.getKey(), e.getValue()});
                    }
                    copy = entries;
                }
                saved.add(new Object[] {target, f, value, copy});
            }
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    public void restore(Object token) throws Exception {
        for (Object[] entry : (List<Object[]>) token) {
            Object target = entry[0];
            Field f = (Field) entry[1];
            Object value = entry[2];
            Object copy = entry[3];
            try {
                if (f.get(target) != value) {
                    f.set(target, value);
                }
                if (value instanceof Collection) {
                    Collection c = (Collection) value;
                    List<Object> was = (List<Object>) copy;
                    if (!sameElements(c, was)) {
                        c.clear();
                        c.addAll(was);
                    }
                } else if (value instanceof Map) {
                    Map m = (Map) value;
                    List<Object[]> was = (List<Object[]>) copy;
                    boolean same = m.size() == was.size();
                    for (Object[] e : was) {
                        same = same && m.containsKey(e[0]) && m.get(e[0]) == e[1];
                    }
                    if (!same) {
                        m.clear();
                        for (Object[] e : was) {
                            m.put(e[0], e[1]);
                        }
                    }
                }
            } catch (UnsupportedOperationException | IllegalAccessException e) {
                // an immutable value: nothing can have changed it
            }
        }
    }

    private static boolean sameElements(Collection<?> now, List<Object> was) {
        if (now.size() != was.size()) {
            return false;
        }
        Iterator<?> it = now.iterator();
        for (Object o : was) {
            if (it.next() != o) {
                return false;
            }
        }
        return true;
    }

    // -- what statement_set.execute() would submit ---------------------------------------------

    @SuppressWarnings("unchecked")
    public Pipeline statementSetPipeline(Object statementSet) throws Exception {
        StatementSetImpl<?> set = (StatementSetImpl<?>) statementSet;
        Field envField = StatementSetImpl.class.getDeclaredField("tableEnvironment");
        envField.setAccessible(true);
        TableEnvironmentImpl tableEnv = (TableEnvironmentImpl) envField.get(set);
        List<?> operations = set.getOperations();
        if (operations.isEmpty()) {
            throw new IllegalStateException("the statement set holds no statements");
        }
        Method translate = TableEnvironmentImpl.class.getDeclaredMethod("translate", List.class);
        translate.setAccessible(true);
        List<Transformation<?>> transformations =
                (List<Transformation<?>>) translate.invoke(tableEnv, new ArrayList<>(operations));
        Field executorField = TableEnvironmentImpl.class.getDeclaredField("execEnv");
        executorField.setAccessible(true);
        Executor executor = (Executor) executorField.get(tableEnv);
        return executor.createPipeline(
                transformations,
                tableEnv.getConfig().getConfiguration(),
                "insert-into_pytest-opid",
                Collections.emptyList());
    }

    // -- what a jar's main would submit ------------------------------------------------------

    public static final class JarPipeline {
        private final PackagedProgram program;
        private final Pipeline pipeline;

        JarPipeline(PackagedProgram program, Pipeline pipeline) {
            this.program = program;
            this.pipeline = pipeline;
        }

        public Pipeline getPipeline() {
            return pipeline;
        }

        public ClassLoader getClassLoader() {
            return program.getUserCodeClassLoader();
        }

        public String getMainClassName() {
            return program.getMainClassName();
        }

        public void close() {
            program.close();
        }
    }

    public JarPipeline jarPipeline(String jar, String mainClass, String[] args, int parallelism)
            throws Exception {
        Configuration configuration = new Configuration();
        PackagedProgram.Builder builder =
                PackagedProgram.newBuilder()
                        .setJarFile(new File(jar))
                        .setArguments(args)
                        .setConfiguration(configuration);
        if (mainClass != null) {
            builder.setEntryPointClassName(mainClass);
        }
        PackagedProgram program = builder.build();
        try {
            Pipeline pipeline =
                    PackagedProgramUtils.getPipelineFromProgram(
                            program, configuration, parallelism, true);
            return new JarPipeline(program, pipeline);
        } catch (Exception | Error e) {
            program.close();
            throw e;
        }
    }

    public String describe(Throwable error) {
        StringBuilder out = new StringBuilder();
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable t = error; t != null && seen.add(t); t = t.getCause()) {
            if (out.length() > 0) {
                out.append('\n');
            }
            out.append(t.getClass().getName()).append('\t');
            out.append(t.getMessage() == null ? "" : t.getMessage().replace('\n', '\r'));
        }
        return out.toString();
    }
}
"""

#: The helper class's name in :data:`HELPER_SOURCE`.
HELPER_CLASS = "pytestopid.OpidFlinkReader"
