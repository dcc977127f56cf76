// Operator alerting on the Service Bus namespace. Two rules, because the criteria of one
// metric alert are ANDed and we want either condition to page someone:
//  - an order ended in Error and its alert is waiting in the operator-alerts queue;
//  - any entity has dead-lettered messages (Invariant 6: each leaves its order visible).
param serviceBusNamespaceName string
param actionGroupName string
param alertNamePrefix string
param operatorAlertsQueue string
param alertEmail string = ''
param tags object

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource actionGroup 'Microsoft.Insights/actionGroups@2022-04-01' = {
  name: actionGroupName
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'orderops'
    enabled: true
    emailReceivers: empty(alertEmail)
      ? []
      : [
          {
            name: 'operator'
            emailAddress: alertEmail
            useCommonAlertSchema: true
          }
        ]
  }
}

resource operatorAlertsWaiting 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${alertNamePrefix}-operator-alerts'
  location: 'global'
  tags: tags
  properties: {
    description: 'Messages are waiting in ${operatorAlertsQueue}: an order ended in Error and needs an operator.'
    severity: 2
    enabled: true
    scopes: [namespace.id]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'ActiveOperatorAlerts'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [operatorAlertsQueue]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

resource deadLettered 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${alertNamePrefix}-dead-lettered'
  location: 'global'
  tags: tags
  properties: {
    description: 'An entity has dead-lettered messages; the dimension names which one.'
    severity: 1
    enabled: true
    scopes: [namespace.id]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadLettered'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          // '*' splits the series per entity, so each queue alerts on its own.
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: ['*']
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}
